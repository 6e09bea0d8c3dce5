"""The process Claude Code starts for each hook event: `python -S <this file> record`.

`nmem install claude-code` writes this command instead of the `nmem` console script. The
hook path needs only the standard library and nmem, so it can skip what every other
Python program pays for at start: `-S` leaves out `site` (the .pth hooks of every
installed package), and running this file rather than pip's wrapper leaves out the `re`
import the wrapper makes: 1–3 ms of a 20–35 ms hook (p50; bench/hooks.py prints both forms). nmem's own parent
directory goes first on `sys.path` in place of this file's directory.
"""

import os
import sys

if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from nmem.adapters.hooks.run import main

    main()
