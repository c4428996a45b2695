"""Knowledge-graph construction by collaborating NER, RE and EE experts (CooperKGC)."""
