"""Record that a native-teacher review has read a locale as it is now.

    .venv/bin/python scripts/locales_reviewed.py ja pt [--note "what the review read"]

Writes each named locale's SHA-256 (and the date and note) into assets/locale-reviews.json.
tests/test_terms.py fails when a locale file has changed since its last review: every
change to ja.json or pt.json (and en.json, the source) is read by a reviewer briefed as
a native teacher of the language, in context (the screenshots), before it lands; the
review then runs this.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
from pathlib import Path

LOCALES = Path(__file__).resolve().parent.parent / "locales"
RECORD = LOCALES.parent / "assets" / "locale-reviews.json"  # beside the locales, not among them


def digest(lang: str) -> str:
    return hashlib.sha256((LOCALES / f"{lang}.json").read_bytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("langs", nargs="+", choices=("en", "ja", "pt"))
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    record = json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.exists() else {}
    for lang in args.langs:
        record[lang] = {"sha256": digest(lang), "date": datetime.date.today().isoformat(), "note": args.note}
    RECORD.write_text(json.dumps(record, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    print(f"recorded the review of {', '.join(args.langs)} in assets/{RECORD.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
