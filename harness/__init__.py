"""Test and benchmark harness: starts the app and a headless browser for it. Used by
the browser tests and by bench/; the app never imports it."""
