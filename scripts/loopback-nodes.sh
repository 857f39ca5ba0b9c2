#!/usr/bin/env bash
# Three Ray "nodes" on this machine for cluster/cluster-local.yaml: an SSH server on each
# of 127.0.0.1, 127.0.0.2 and 127.0.0.3, each with a home folder of its own, so that
# `ray up` syncs and installs the checkout on every node as it would on three machines.
#
#   sudo bash scripts/loopback-nodes.sh start [DIR]    # default DIR: /tmp/jury-rl-nodes
#   sudo bash scripts/loopback-nodes.sh stop [DIR]
#
# DIR receives the client key (`DIR/key`, cluster-local.yaml's ssh_private_key), the
# servers' configs and log (DIR/sshd.log), and per node a home `DIR/node-127.0.0.X` and
# a /tmp/ray `DIR/tmp-ray-127.0.0.X` (Ray's sessions and logs on that node).
#
# Isolation, and why:
# - One PID namespace holds the three servers and everything started through them.
#   `ray stop` (which `ray up` and `ray down` run) kills every Ray process it can see;
#   here it sees only this cluster's, never another Ray on the machine. `stop` ends the
#   namespace, which kills whatever is still running in it.
# - Each server has a mount namespace of its own, in which /etc/passwd gives root the
#   node's home (sshd and ssh take a home from passwd, not $HOME: the head's autoscaler
#   finds ~/ray_bootstrap_key.pem there) and /tmp/ray is the node's own.
#
# What a node shares with the machine, as an image would give it: the Python (each
# home's .bashrc puts the folder of $PYTHON, default python3 on PATH, first on PATH) and
# the caches (each home's ~/.cache links to $HOME/.cache of whoever runs `start`): the
# tiny model `jury make-tiny-model` built, and the DeepSpeed CPU op a learner would
# otherwise compile again on each fresh node (minutes on two busy cores).
#
# Exit 3, with the reason on stderr, when this machine cannot do it (not root, no sshd,
# rsync or unshare, port 22 taken).
set -euo pipefail

ADDRESSES=(127.0.0.1 127.0.0.2 127.0.0.3)
cmd=${1:-}
dir=${2:-/tmp/jury-rl-nodes}

unable() { echo "loopback-nodes: $*" >&2; exit 3; }
# running, not a zombie waiting to be reaped
alive() { [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat")" != Z ]; }
listening() { (exec 3<>"/dev/tcp/$1/22") 2>/dev/null; }

check_machine() {
    [ "$(id -u)" = 0 ] || unable "run as root: sshd binds port 22 and needs namespaces"
    local missing=()
    [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
    command -v rsync >/dev/null || missing+=(rsync)
    [ ${#missing[@]} = 0 ] || unable "missing ${missing[*]}: apt-get install -y openssh-server rsync (as root; .ci/run does)"
    command -v unshare >/dev/null || unable "missing unshare: apt-get install -y util-linux"
    unshare --pid --fork --mount-proc true 2>/dev/null \
        || unable "cannot create a PID namespace here (unshare --pid needs CAP_SYS_ADMIN)"
    for ip in "${ADDRESSES[@]}"; do
        listening "$ip" && unable "$ip:22 is taken by another SSH server; stop it (or '$0 stop' an earlier start)"
    done
    return 0
}

write_node() {  # ip python_bin: the node's home, passwd, /tmp/ray and sshd config
    local ip=$1 bin=$2 home="$dir/node-$1"
    mkdir -p "$home" "$dir/tmp-ray-$ip" "$HOME/.cache"
    [ -e "$home/.cache" ] || ln -s "$HOME/.cache" "$home/.cache"
    # Only the "image": the machine's Python on PATH. The cluster file's setup commands
    # append their own lines (venv, RAY_AUTH_MODE), as on a fresh node.
    if [ ! -f "$home/.bashrc" ]; then
        echo "export PATH=\"$bin:\$PATH\"" > "$home/.bashrc"
        echo '. "$HOME/.bashrc"' > "$home/.profile"
    fi
    awk -F: -v OFS=: -v home="$home" '$1 == "root" { $6 = home } 1' /etc/passwd > "$dir/passwd-$ip"
    cat > "$dir/sshd_config-$ip" <<EOF
Port 22
ListenAddress $ip
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
# the key files live under /tmp, which is world-writable: StrictModes would refuse them
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile none
# \`ray up\` opens many sessions at once (multiplexed connections, parallel node updates)
MaxStartups 100
MaxSessions 100
EOF
    /usr/sbin/sshd -t -f "$dir/sshd_config-$ip"
}

start() {
    check_machine
    local bin
    bin=$(dirname "$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')")
    dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
    mkdir -p /tmp/ray /run/sshd  # mount points; /run/sshd: sshd's privilege separation folder
    [ -f "$dir/key" ] || ssh-keygen -q -t ed25519 -N "" -C jury-rl-local -f "$dir/key"
    [ -f "$dir/host_key" ] || ssh-keygen -q -t ed25519 -N "" -f "$dir/host_key"
    cp "$dir/key.pub" "$dir/authorized_keys"
    for ip in "${ADDRESSES[@]}"; do write_node "$ip" "$bin"; done

    # The namespace's init: one server per node, each in its mount namespace; on SIGTERM
    # it exits, and the kernel then kills everything else in the PID namespace.
    {
        echo "trap 'exit 0' TERM"
        for ip in "${ADDRESSES[@]}"; do
            echo "unshare --mount --propagation private bash -c \"mount --bind '$dir/passwd-$ip' /etc/passwd" \
                 "&& mount --bind '$dir/tmp-ray-$ip' /tmp/ray && exec /usr/sbin/sshd -D -e -f '$dir/sshd_config-$ip'\" &"
        done
        echo "wait"
    } > "$dir/init.sh"
    setsid unshare --pid --fork --mount-proc --kill-child bash "$dir/init.sh" \
        >> "$dir/sshd.log" 2>&1 < /dev/null &
    echo $! > "$dir/unshare.pid"

    for _ in $(seq 50); do
        local up=0
        for ip in "${ADDRESSES[@]}"; do listening "$ip" && up=$((up + 1)); done
        if [ "$up" = ${#ADDRESSES[@]} ]; then
            echo "loopback-nodes: sshd up on ${ADDRESSES[*]}, key $dir/key"
            return 0
        fi
        alive "$(cat "$dir/unshare.pid")" || break
        sleep 0.2
    done
    echo "loopback-nodes: sshd did not come up; its log:" >&2
    cat "$dir/sshd.log" >&2
    stop
    exit 1
}

stop() {
    [ -d "$dir" ] || return 0
    dir=$(cd "$dir" && pwd)
    local pidfile="$dir/unshare.pid"
    [ -f "$pidfile" ] || return 0
    local pid init
    pid=$(cat "$pidfile")
    # only our unshare: check its command line before signalling. unshare itself ignores
    # SIGTERM while it waits; its child is the namespace's init.
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir/init.sh"; then
        init=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null || true)
        [ -n "${init// /}" ] && kill $init 2>/dev/null || true
        for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then echo "loopback-nodes: unshare $pid did not exit" >&2; return 1; fi
    fi
    rm -f "$pidfile"
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac
