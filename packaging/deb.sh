#!/bin/sh
# Builds the Debian package: target/debian/meridian_<version>-1_<arch>.deb.
# Needs cargo-deb (cargo install cargo-deb --locked).
set -eu
cd "$(dirname "$0")/.."
cargo build --release --locked -p meridian -p meridian-probe
packaging/deb-assets.sh target/release
cargo deb --no-build "$@"
