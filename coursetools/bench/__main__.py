from coursetools.bench import main

raise SystemExit(main())
