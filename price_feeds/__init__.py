"""Price and availability feeds (installed as ``hetinfra.price_feeds``).

Every source yields validated :class:`~hetinfra.price_feeds.offers.Offer` rows collected in an
:class:`~hetinfra.price_feeds.offers.OfferSnapshot` with its as-of time and content hash.
"""
