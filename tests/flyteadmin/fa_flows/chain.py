"""Three tasks in a chain, what the Flyte client tests register and run."""

from flytekit import task, workflow


@task
def double(x: int) -> int:
    return 2 * x


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def describe(total: int) -> str:
    print(f"describing {total}")
    return f"total={total}"


@workflow
def pipeline(x: int = 3) -> str:
    d = double(x=x)
    s = add(a=d, b=x)
    return describe(total=s)
