"""The dashboard's colours and inline styles, in one place: charts, tables and marked-up text
use the same green for what is in, red for what is out and grey for what does not apply."""

from __future__ import annotations

BLUE = "#1f5fa8"  # the item a chart is about
MID_BLUE = "#5b8cc8"
LIGHT_BLUE = "#8fb3de"
GREEN = "#1b7f3b"
AMBER = "#d08a00"
PURPLE = "#8e44ad"
GREY = "#7a7f87"
LIGHT_GREY = "#b4b9c0"
RED = "#c0392b"  # thresholds and cut-offs drawn on a chart

GREEN_BACKGROUND, GREEN_TEXT = "#d4f4dd", "#0b4a1f"
RED_BACKGROUND, RED_TEXT = "#fbdcdc", "#7a1010"

# Words added to and removed from an answer (HTML, st.html).
ADDED_STYLE = f"background:{GREEN_BACKGROUND};color:{GREEN_TEXT};text-decoration:none"
REMOVED_STYLE = f"background:{RED_BACKGROUND};color:{RED_TEXT}"

# Table cells (pandas Styler): all there, something missing, nothing to count.
COMPLETE_STYLE = f"background-color:{GREEN_BACKGROUND};color:{GREEN_TEXT}"
INCOMPLETE_STYLE = f"background-color:{RED_BACKGROUND};color:{RED_TEXT}"
NONE_STYLE = f"color:{GREY}"
