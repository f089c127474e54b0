"""Golden data the tests compare with (recorded by the code of an earlier commit; each test names it)."""
