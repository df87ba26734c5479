from eqdelete.tools.cli import main

raise SystemExit(main())
