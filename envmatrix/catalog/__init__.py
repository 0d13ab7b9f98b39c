"""Catalog of known environment variables and their value domains.

Everything that names a variable (setups, sweeps, bisect input) is checked here
first, so typos and impossible values fail before any job is launched.
"""

from envmatrix.catalog.catalog import (
    CATALOG_FAMILIES,
    SEARCH_SPACES_DIR,
    Catalog,
    VarSpec,
    catalog_family,
    default_catalog,
    load_catalog,
)
from envmatrix.catalog.domains import (
    BoolDomain,
    BytesDomain,
    Domain,
    EnumDomain,
    IntDomain,
    ListDomain,
    PathListDomain,
    StringDomain,
    parse_domain,
)

__all__ = [
    "CATALOG_FAMILIES",
    "SEARCH_SPACES_DIR",
    "BoolDomain",
    "BytesDomain",
    "Catalog",
    "Domain",
    "EnumDomain",
    "IntDomain",
    "ListDomain",
    "PathListDomain",
    "StringDomain",
    "VarSpec",
    "catalog_family",
    "default_catalog",
    "load_catalog",
    "parse_domain",
]
