from m3cli.app import main

main()
