from specops.cli.main import main

main()
