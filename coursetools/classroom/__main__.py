from coursetools.classroom.grade import main

raise SystemExit(main())
