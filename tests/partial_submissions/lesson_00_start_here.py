"""Works on the visible float32 cases, but converts float64 input to float32."""

WRONG_CELLS = {
    "ex_to_fahrenheit": (
        "def to_fahrenheit(celsius):\n"
        "    return celsius.float() * 9 / 5 + 32\n"
    ),
}
EXPECTED_SCORE = 1.0
