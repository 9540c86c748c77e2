# Carve CSI driver image: the static carve binary on Debian, with the tools
# it runs on the node (lvm2, mkfs/fsck/resize for ext4, xfs and btrfs, blkid,
# blkdiscard, cryptsetup for encrypted volumes). The node plugin runs
# privileged with the host's /dev, /run/lvm and /etc/lvm mounted (see
# deploy/).
FROM golang:1.26-bookworm AS build
# Empty unless given: Go's defaults. `make image` (scripts/image/build.sh)
# passes GOPROXY=off with the machine's module cache mounted at /go/pkg/mod.
ARG GOPROXY
ARG GOFLAGS
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" -o /out/carve ./cmd/carve

FROM debian:bookworm-slim
# kmod: lvm2 loads the device-mapper target an LV type needs (dm-writecache,
# dm-raid, dm-thin-pool) with modprobe, from the host's /lib/modules that
# the node DaemonSet mounts; without it such an LV fails on a node that has
# not loaded the module yet.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      lvm2 thin-provisioning-tools e2fsprogs xfsprogs btrfs-progs util-linux mount cryptsetup-bin kmod \
 # What would make two builds of the same sources differ (make release
 # and make test check that they do not): ldconfig's aux-cache records the
 # files' inode times (only a cache, rebuilt when ldconfig runs); lvm2's
 # postinst scans the build machine's block devices and wrote a metadata
 # backup of a VG it found there (the e2e's, on a loop device) into
 # /etc/lvm/backup: the build host's state, never the image's.
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
      /var/cache/ldconfig/aux-cache /etc/lvm/backup /etc/lvm/archive \
 # No udev in the container: let lvm2 create device nodes itself and never
 # wait for udev events that will not come.
 && sed -i -e 's/^\(\s*\)# *udev_sync = 1/\1udev_sync = 0/' \
           -e 's/^\(\s*\)# *udev_rules = 1/\1udev_rules = 0/' /etc/lvm/lvm.conf
COPY --from=build /out/carve /usr/local/bin/carve
ENTRYPOINT ["/usr/local/bin/carve"]
