"""Network namespaces for the fault matrix, set up and removed by
tests/comm/netns_lib.sh: N "hosts" joined by veth pairs to a bridge, host i
at 10.77.0.(i+1). The ranks run in them through `ip netns exec`."""
import os
import subprocess


class Netns:
    def __init__(self, tests_dir, n):
        self.lib = os.path.join(tests_dir, "comm", "netns_lib.sh")
        self.tag = f"bf{os.getpid() % 100000}"
        self.n = n
        self.up = False

    def _bash(self, body):
        return subprocess.run(["bash", "-c", f'. "{self.lib}"; NETNS_TAG={self.tag}; {body}'],
                              capture_output=True, text=True)

    def start(self):
        """None when up; else why namespaces cannot be made here."""
        p = self._bash('netns_ready || { echo "$NETNS_WHY"; exit 77; }')
        if p.returncode == 77:
            return p.stdout.strip()
        # netns_up removes them when its shell exits: that trap is cleared
        # here, and stop() removes them.
        p = self._bash(f"netns_up {self.n} 1gbit || exit 1; trap - EXIT")
        if p.returncode != 0:
            # Where namespaces exist but cannot be wired (a chroot whose root
            # is not a mount point refuses `mount --make-rslave /`), the row
            # cannot run here: skipped with the reason, as netns_ready's are.
            self.stop()
            return f"namespace setup failed: {(p.stdout + p.stderr).strip()}"
        self.up = True
        return None

    def stop(self):
        self._bash(f"NETNS_N={self.n}; netns_down")
        self.up = False

    def host(self, i):
        return f"{self.tag}h{i}"

    @staticmethod
    def ip(i):
        return f"10.77.0.{i + 1}"

    def link_down(self, i):
        """Host i's veth, at the bridge: its packets vanish, nothing is reset."""
        subprocess.run(["ip", "-n", f"{self.tag}br", "link", "set", f"v{i}{self.tag}", "down"], check=True)
