"""Step grids that widen past an edge where a tuned choice lies."""


def extend_axis(values, used) -> tuple:
    """``values`` (a step grid's axis, in its order) with one point added past each edge that a
    method chose (``used``: the chosen indices), at the ratio of the two outermost points on
    that side. A one-point axis is a fixed value, never extended."""
    values = tuple(float(v) for v in values)
    if len(values) < 2:
        return values
    rising = values[-1] > values[0]
    ordered = sorted(values)
    added = []
    if any(values[k] == ordered[0] for k in used):
        added.append(float(f"{ordered[0] ** 2 / ordered[1]:.3g}"))
    if any(values[k] == ordered[-1] for k in used):
        added.append(float(f"{ordered[-1] ** 2 / ordered[-2]:.3g}"))
    return tuple(sorted(set(values) | set(added), reverse=not rising))
