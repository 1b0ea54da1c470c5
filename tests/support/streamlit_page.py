"""Waiting on a served Streamlit page in a real browser."""
from __future__ import annotations

# A rerun draws the page from the top and leaves the previous run's elements below on screen
# (marked stale) until it reaches them; the status widget may appear only some time after a
# run has started. The app's root names the script's state; the page is idle once that state
# is "not running", no status widget is shown and no element is stale.
IDLE = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app !== null
        && app.getAttribute('data-test-script-state') === 'notRunning'
        && !document.querySelector('[data-testid="stStatusWidget"]')
        && !document.querySelector('[data-testid="stElementContainer"][data-stale="true"]');
}"""


def wait_until_idle(page, timeout_ms: int) -> None:
    """Until the page's script has run to its end and every element on it is of that run."""
    page.wait_for_function(IDLE, timeout=timeout_ms)
