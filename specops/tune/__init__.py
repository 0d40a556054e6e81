"""Tune: plan a grid of engine configurations, measure it on the real engine (resumable), fit the
performance model's coefficients and acceptance, store the calibration and report predicted vs
measured. The run itself is orchestrated in specops.api.tune. Importing this package loads nothing
heavy."""
