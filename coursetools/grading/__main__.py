from coursetools.grading import main

raise SystemExit(main())
