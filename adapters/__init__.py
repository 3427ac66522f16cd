"""Scheduling adapters that decide, per query, how a frozen VLA is sampled (see ``adapters/eqrl``)."""
