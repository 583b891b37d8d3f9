from compgen.cli import main

main()
