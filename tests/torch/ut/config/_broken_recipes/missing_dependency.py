"""A recipe module that imports a package that does not exist."""

import hyper_parallel_no_such_dependency  # noqa: F401
