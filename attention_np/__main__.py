"""``python -m attention_np``: see :mod:`attention_np.cli`."""

import sys

from attention_np.cli import main

if __name__ == "__main__":
    sys.exit(main())
