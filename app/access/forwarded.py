"""Which proxies' forwarded headers are trusted (``CALIBRATION_FORWARDED_ALLOW_IPS``)."""

from __future__ import annotations

import ipaddress


def check_forwarded_allow_ips(value: str) -> str:
    """``value`` when every comma-separated entry is an address or a network (host bits zero),
    or it is ``*`` alone; else ValueError naming the entry. uvicorn keeps an entry it cannot
    parse (a typo, ``10.0.0.1/8``, a ``*`` among others) as a literal that no address
    matches: it would silently trust no proxy."""
    if value.strip() == "*":
        return "*"
    for entry in (e.strip() for e in value.split(",")):
        try:
            ipaddress.ip_network(entry) if "/" in entry else ipaddress.ip_address(entry)
        except ValueError:
            raise ValueError(
                f"forwarded_allow_ips: {entry!r} is not an IP address nor a network "
                "(host bits zero); `*` trusts everyone, and only on its own"
            ) from None
    return value
