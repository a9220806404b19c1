from mcsim.cli import main

if __name__ == "__main__":  # also imported by processes the CLI spawns
    main()
