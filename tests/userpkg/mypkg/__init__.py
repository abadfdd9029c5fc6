"""A user's own package, outside the project: an env family the tests name as
`mypkg.families:make_family` (tests put tests/userpkg on PYTHONPATH)."""
