# Builds the local sandbox's root for the `unshare` path (bubblewrap builds the same root
# from its options). Runs as root of the new user namespace and pid 1 of the new pid
# namespace, in a new mount namespace. Every step is checked: a half-isolated sandbox must
# not start.
#   $1  an empty dir: the new root
#   $2  the dir holding the sandbox's writable dirs (etc tmp root home var run)
#   $3  how to finish (a shell command run in the new root)
#   then the host's system dirs, as "bind:/usr" (read-only bind) or "link:/bin:usr/bin" (symlink),
#   read-only trees for the new /etc as "etc:SOURCE:/etc/alternatives", and dirs to hide
#   under an empty tmpfs (unreadable here) as "mask:/usr/share/polkit-1/rules.d"
set -eu
R=$1; W=$2; FINISH=$3; shift 3
mount -t tmpfs -o mode=755,size=1m tmpfs "$R"
for spec in "$@"; do
  case $spec in
    bind:*) d=${spec#bind:}; mkdir -p "$R$d"; mount --rbind "$d" "$R$d" ;;
    link:*) rest=${spec#link:}; ln -s "${rest#*:}" "$R${rest%%:*}" ;;
    etc:*) ;;
    mask:*) mount -t tmpfs -o mode=755,size=4k tmpfs "$R${spec#mask:}" ;;
    *) echo "setup.sh: bad spec $spec" >&2; exit 1 ;;
  esac
done
# The system dirs read-only, every mount under them. A remount keeps the flags the kernel
# locked (nosuid, nodev, ...) only if we repeat them, so reuse each mount's own options.
while read -r _ _ _ _ mp opts _; do
  case "$mp" in "$R"/*) ;; *) continue ;; esac
  mount -o "remount,bind,ro${opts#r[ow]}" "$mp"
done < /proc/self/mountinfo
for d in etc tmp root home var run; do mkdir "$R/$d"; mount --bind "$W/$d" "$R/$d"; done
for spec in "$@"; do
  case $spec in
    etc:*) rest=${spec#etc:}; mount --bind "${rest%:*}" "$R${rest##*:}"; mount -o remount,bind,ro "$R${rest##*:}" ;;
  esac
done
mkdir "$R/proc" "$R/dev"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
mount -t tmpfs -o nosuid,mode=755 tmpfs "$R/dev"
for n in null zero full random urandom tty; do
  : > "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"
done
mkdir "$R/dev/shm" "$R/dev/pts"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$R/dev/shm"
ln -s /proc/self/fd "$R/dev/fd"; ln -s fd/0 "$R/dev/stdin"; ln -s fd/1 "$R/dev/stdout"; ln -s fd/2 "$R/dev/stderr"
# The agent's shell mounts a /dev/shm of its own; the rest of /dev stays as made here.
mount -o remount,bind,ro "$R/dev"
# Nothing else may be created at the top level.
mount -o remount,bind,ro "$R"
cd "$R"
pivot_root . .
umount -l .
cd /
hostname sandbox 2>/dev/null || true  # sethostname: allowed in our own uts namespace
# A new network namespace starts with `lo` down (bubblewrap brings it up itself). With
# network=True this is the host's namespace, which we may not change: failures are ignored.
ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null || python3 -c '
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0))[:18])[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))' 2>/dev/null || true
eval "$FINISH"
