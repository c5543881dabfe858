from loadersearch.cli import main

main()
