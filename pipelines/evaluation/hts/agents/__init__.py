"""The HTS judge agent (prompt templates beside its module)."""
