"""A tiny sample program for the example tools to scan."""


def greet(name):
    # TODO: support a --shout flag
    return f"hello, {name}"


if __name__ == "__main__":
    print(greet("world"))
