"""The three KGC experts (NER, RE, EE): one module per role (its template name, answer model,
parser and answer form) beside its Jinja2 templates; what they share in ``expert_role``
(reading and writing answers), ``reply_text`` (free-text replies) and ``answer_bounds``."""
