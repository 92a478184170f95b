# Shared by scripts/setup.sh and scripts/test.sh (sourced, not run).

# Run a command as root: directly when we are root, else through password-less sudo.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo "$@"
  else return 1
  fi
}

# Install Debian packages without their recommendations (quietly); fails without apt or root.
apt_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || return 1
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
