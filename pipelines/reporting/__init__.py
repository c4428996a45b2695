"""Table, rendering and plot helpers shared by the teams' reports and by evaluation (below both)."""
