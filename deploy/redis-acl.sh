#!/bin/sh
# Renders deploy/users.acl for redis-server's aclfile: each placeholder
# #<USER-password-sha256> becomes the SHA-256 of that user's password, read from the
# environment (the file never holds a password, and Redis refuses the placeholders):
#   default (the administrator)  REDIS_PASSWORD
#   worker                       REDIS_WORKER_PASSWORD
#   monitor                      REDIS_MONITOR_PASSWORD
#
#   sh deploy/redis-acl.sh deploy/users.acl /tmp/users.acl
#   redis-server deploy/redis.conf --aclfile /tmp/users.acl
set -eu
template=$1
output=$2
sha256() { printf '%s' "$1" | sha256sum | cut -d ' ' -f 1; }
admin=$(sha256 "${REDIS_PASSWORD:?set REDIS_PASSWORD}")
worker=$(sha256 "${REDIS_WORKER_PASSWORD:?set REDIS_WORKER_PASSWORD}")
monitor=$(sha256 "${REDIS_MONITOR_PASSWORD:?set REDIS_MONITOR_PASSWORD}")
umask 022
sed -e "s/#<default-password-sha256>/#$admin/" \
    -e "s/#<worker-password-sha256>/#$worker/" \
    -e "s/#<monitor-password-sha256>/#$monitor/" "$template" > "$output.tmp"
mv "$output.tmp" "$output"
