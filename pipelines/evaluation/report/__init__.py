"""The report: tables in the papers' layouts, plots, the summary pages, and the stage that builds them."""
