"""What the bench/ps drivers share: the commit a result was measured at."""
import subprocess


def git_commit(root):
    """HEAD of the repository at `root`, short form; None outside a git checkout."""
    try:
        return subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
