import sys

from greeter.farewell import farewell
from greeter.greet import greet


def main(argv: list[str]) -> int:
    name = argv[0] if argv else "world"
    print(greet(name))
    print(farewell(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
