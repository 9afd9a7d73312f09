#!/bin/bash
# pjdfstest (the POSIX file system test suite, from crates.io) on the writable folders of a
# mount: a TEVD disk (an empty 64 MiB one made by examples/tvda_fixture: the samples are too
# small for the suite's big files), whose folders are real read/write folders. Every test that fails is
# listed with its reason in posix/pjdfstest-tevd.exclude; any other failure, or a listed
# test that passes, fails this test. The disk stays valid (`worldfs check`) afterwards.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"

"$ROOT/scripts/install-tools" >/dev/null
d=$(fixture tevd)
M=$T/mnt
mount_world "$d" "$M"
mkdir "$M/pjdfstest"
"$ROOT/mount-tests/posix/run-pjdfstest" "$M/pjdfstest" "$ROOT/mount-tests/posix/pjdfstest-tevd.exclude" "$T/pjdfstest.out" \
  || fail "pjdfstest (full output: $T/pjdfstest.out)"
pgrep -f -- "--log-file $T/worldfs.log" >/dev/null || fail "the daemon died during pjdfstest"
rm -rf "$M/pjdfstest" || fail "rm -r of what pjdfstest left"
unmount_world "$M"
check_ok "$d"
