from eqdelete.cli import main

raise SystemExit(main())
