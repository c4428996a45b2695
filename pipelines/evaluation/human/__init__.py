"""Human rating: blind comparison sheets, the HTML rating form, import of filled sheets."""
