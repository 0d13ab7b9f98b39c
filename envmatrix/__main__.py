import signal
import sys

# Until main() installs its own handler, a Ctrl-C while the command line is imported is a quiet exit 130.
signal.signal(signal.SIGINT, lambda *_: sys.exit(130))

from envmatrix.cli import main  # noqa: E402 - after the handler

code = main()
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command is done: a Ctrl-C during teardown changes nothing
sys.exit(code)
