#!/usr/bin/env bash
# carry_mpi.sh - Open MPI's run-time for a machine where no package can be
# installed (the GPU machine of bench/gpu_session.sh, step mpi): Debian's
# packages fetched here with apt-get download into .carry/debs (ignored by
# git) and unpacked with dpkg -x into .carry/mpi.  The base libraries every
# Linux system has (libc, libstdc++, zlib, ...) stay out: a second libc on
# LD_LIBRARY_PATH would break every program; so do hwloc's optional
# plugins (their XML reader pulls in ICU, 35 MB of the 64 MB a device run
# may carry).  Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15
      libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 ibverbs-providers
      librdmacm1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 libpsm2-2 libpsm-infinipath1
      libpciaccess0)
rm -rf .carry/debs .carry/mpi
mkdir -p .carry/debs .carry/mpi
(cd .carry/debs && apt-get download "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed')
for deb in .carry/debs/*.deb; do
  dpkg -x "$deb" .carry/mpi
done
rm -rf .carry/mpi/usr/share/doc .carry/mpi/usr/share/man
du -sh .carry/mpi
