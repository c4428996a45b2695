"""The three KGC experts (NER, RE, EE): one Jinja2 template per task and language plus a parser."""
