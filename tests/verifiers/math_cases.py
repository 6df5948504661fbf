r"""Hand-written grading cases: (completion, gold, expected score).

Each group targets a trap on which rule-based graders disagree. Completions use the
strategies a model might: ``\boxed{}``, ``<answer>`` tags, "the answer is", a bare number.
"""

from __future__ import annotations

MathCase = tuple[str, str, float]

INTEGERS: list[MathCase] = [
    (r"\boxed{42}", "42", 1.0),
    (r"\boxed{042}", "42", 1.0),
    (r"\boxed{42.0}", "42", 1.0),
    (r"\boxed{42.000}", "42", 1.0),
    (r"\boxed{+42}", "42", 1.0),
    (r"\boxed{-7}", "-7", 1.0),
    (r"\boxed{7}", "-7", 0.0),
    (r"\boxed{-7}", "7", 0.0),
    (r"\boxed{ 42 }", "42", 1.0),
    (r"\boxed{0}", "0", 1.0),
    (r"\boxed{-0}", "0", 1.0),
    (r"\boxed{1e3}", "1000", 1.0),
    (r"\boxed{10^{3}}", "1000", 1.0),
    (r"\boxed{10^3}", "1000", 1.0),
    (r"\boxed{2^{10}}", "1024", 1.0),
    (r"\boxed{1023}", "1024", 0.0),
]

SHARED_DIGITS: list[MathCase] = [
    # wrong answers that share digits with the gold
    (r"\boxed{123}", "132", 0.0),
    (r"\boxed{12}", "120", 0.0),
    (r"\boxed{120}", "12", 0.0),
    (r"\boxed{1.5}", "15", 0.0),
    (r"\boxed{15}", "1.5", 0.0),
    (r"\boxed{0.15}", "0.015", 0.0),
    (r"\boxed{314}", "3.14", 0.0),
    (r"\boxed{21}", "12", 0.0),
    (r"\boxed{\frac{2}{1}}", r"\frac{1}{2}", 0.0),
    (r"\boxed{\frac{3}{4}}", r"\frac{4}{3}", 0.0),
    (r"\boxed{1000}", "100", 0.0),
    (r"\boxed{1,001}", "1001", 1.0),
    (r"\boxed{1001}", "1,000", 0.0),
    (r"\boxed{5.50}", "5.05", 0.0),
    (r"\boxed{\sqrt{2}}", "2", 0.0),
    (r"\boxed{2\sqrt{3}}", r"3\sqrt{2}", 0.0),
    (r"\boxed{x^2}", "2x", 0.0),
]

FRACTIONS_AND_DECIMALS: list[MathCase] = [
    (r"\boxed{0.5}", r"\frac12", 1.0),
    (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),
    (r"\boxed{\frac{1}{2}}", "0.5", 1.0),
    (r"\boxed{\dfrac{1}{2}}", "1/2", 1.0),
    (r"\boxed{\tfrac{1}{2}}", "0.5", 1.0),
    (r"\boxed{1/2}", r"\frac{1}{2}", 1.0),
    (r"\boxed{.5}", "0.5", 1.0),
    (r"\boxed{2/4}", r"\frac{1}{2}", 1.0),
    (r"\boxed{\frac{2}{4}}", "1/2", 1.0),
    (r"\boxed{-\frac{3}{4}}", "-0.75", 1.0),
    (r"\boxed{\frac{-3}{4}}", "-0.75", 1.0),
    (r"\boxed{\frac{3}{4}}", "-0.75", 0.0),
    (r"\boxed{0.75}", r"\frac34", 1.0),
    (r"\boxed{0.333}", r"\frac{1}{3}", 0.0),
    (r"\boxed{0.3333333333}", r"\frac{1}{3}", 1.0),
    (r"\boxed{\frac{1}{3}}", "1/3", 1.0),
    (r"\boxed{2\frac{1}{2}}", "2.5", 1.0),
    (r"\boxed{2\frac{1}{2}}", r"\frac{5}{2}", 1.0),
    (r"\boxed{\frac{5}{2}}", "2.5", 1.0),
    (r"\boxed{1.25}", r"\frac{5}{4}", 1.0),
    (r"\boxed{1.2}", r"\frac{5}{4}", 0.0),
    (r"\boxed{\frac{10}{4}}", r"\frac{5}{2}", 1.0),
    (r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{\sqrt3}{2}", 1.0),
    (r"\boxed{\frac{1}{\sqrt{2}}}", r"\frac{\sqrt{2}}{2}", 1.0),
    (r"\boxed{\frac{1}{0}}", "0", 0.0),
]

THOUSANDS: list[MathCase] = [
    (r"\boxed{1,000}", "1000", 1.0),
    (r"\boxed{1000}", "1,000", 1.0),
    (r"\boxed{1{,}000}", "1000", 1.0),
    (r"\boxed{1\,000}", "1000", 1.0),
    (r"\boxed{12,345,678}", "12345678", 1.0),
    (r"\boxed{1,000,000}", "10^6", 1.0),
    (r"\boxed{1,234.5}", "1234.5", 1.0),
    (r"\boxed{10,\!000}", "10000", 1.0),  # MATH's thousands separator
    (r"\boxed{10000}", r"10,\!000", 1.0),
    (r"\boxed{2,74}", "2.74", 1.0),  # a decimal comma, against a plain number
    (r"\boxed{2,74}", "274", 0.0),
    (r"\boxed{0,111}", "111", 0.0),
    (r"\boxed{1,000}", "100", 0.0),
    ("The answer is 2,500.", "2500", 1.0),
    ("The answer is 2,500.", "250", 0.0),
]

PERCENTAGES: list[MathCase] = [
    (r"\boxed{50\%}", "50", 1.0),
    (r"\boxed{50\%}", r"50\%", 1.0),
    (r"\boxed{50}", r"50\%", 1.0),
    (r"\boxed{50\%}", "0.5", 1.0),
    (r"\boxed{0.5}", r"50\%", 1.0),
    (r"\boxed{50%}", "50", 1.0),
    (r"\boxed{12.5\%}", r"\frac{1}{8}", 1.0),
    (r"\boxed{40\%}", "50", 0.0),
    (r"\boxed{5\%}", "50", 0.0),
    ("the answer is 75%.", "75", 1.0),
]

WRAPPERS_AND_UNITS: list[MathCase] = [
    (r"\boxed{\text{5}}", "5", 1.0),
    (r"\boxed{5\text{ cm}}", "5", 1.0),
    (r"\boxed{\text{5 cm}}", "5", 1.0),
    (r"\boxed{5 \text{ meters}}", "5", 1.0),
    (r"\boxed{5\ \mathrm{kg}}", "5", 1.0),
    (r"\boxed{5\mbox{ dollars}}", "5", 1.0),
    (r"\boxed{\$5}", "5", 1.0),
    (r"\boxed{\$1,250}", "1250", 1.0),
    (r"\boxed{6 \text{ cm}^2}", "6", 1.0),
    (r"\boxed{90^\circ}", "90", 1.0),
    (r"\boxed{90^{\circ}}", "90", 1.0),
    (r"\boxed{90°}", "90", 1.0),
    (r"\boxed{90^\circ}", "45", 0.0),
    (r"\boxed{\textbf{7}}", "7", 1.0),
    (r"\boxed{12 apples}", "12", 1.0),
    (r"\boxed{12 apples}", "13", 0.0),
    (r"\boxed{5 m}", "5", 1.0),
    (r"\boxed{2\pi}", r"2\pi", 1.0),
    (r"\boxed{2\pi}", "2", 0.0),
    (r"\boxed{2 and 3}", "2", 0.0),
    (r"\boxed{3x}", "3", 0.0),
    (r"\boxed{\displaystyle \frac{1}{2}}", "0.5", 1.0),
    (r"\boxed{\left(\frac{1}{2}\right)}", "0.5", 1.0),
    (r"\boxed{$\frac{1}{2}$}", "0.5", 1.0),
    (r"\boxed{\text{Tuesday}}", "Tuesday", 1.0),
    (r"\boxed{\text{tuesday}}", "Wednesday", 0.0),
]

ASSIGNMENTS: list[MathCase] = [
    (r"\boxed{x=3}", "3", 1.0),
    (r"\boxed{x = 3}", "3", 1.0),
    (r"\boxed{3}", "x=3", 1.0),
    (r"\boxed{y=-2}", "-2", 1.0),
    (r"\boxed{x=3}", "-3", 0.0),
    (r"\boxed{x_1 = 5}", "5", 1.0),
    (r"\boxed{a = \frac{1}{2}}", "0.5", 1.0),
    (r"\boxed{x \in [0, 1]}", "[0,1]", 1.0),
    (r"\boxed{x+y=3}", "3", 1.0),  # an equation's right-hand side is its value
    (r"\boxed{x+y=4}", "3", 0.0),
    (r"\boxed{k = 12}", "12", 1.0),
    (r"\boxed{y = 2x + 1}", "y=2x+1", 1.0),  # an equation keeps its left-hand side
    (r"\boxed{x = 2x + 1}", "y=2x+1", 0.0),
    (r"\boxed{\begin{pmatrix} 1 \\ 2 \end{pmatrix}}", r"\begin{pmatrix}1\\ 2\end{pmatrix}", 1.0),
    (r"\boxed{\begin{pmatrix} 1 \\ 2 \end{pmatrix}}", r"\begin{pmatrix}1\\ 3\end{pmatrix}", 0.0),
]

EXPRESSIONS: list[MathCase] = [
    (r"\boxed{3\sqrt{2}}", r"\sqrt{18}", 1.0),
    (r"\boxed{\sqrt{18}}", r"3\sqrt2", 1.0),
    (r"\boxed{2\sqrt{2}}", r"\sqrt{8}", 1.0),
    (r"\boxed{(x+1)^2}", "x^2+2x+1", 1.0),
    (r"\boxed{x^2+2x+1}", "(x+1)^2", 1.0),
    (r"\boxed{x^2+2x+2}", "(x+1)^2", 0.0),
    (r"\boxed{2x+3}", "3+2x", 1.0),
    (r"\boxed{\pi}", r"\pi", 1.0),
    (r"\boxed{\frac{\pi}{2}}", r"\frac{1}{2}\pi", 1.0),
    (r"\boxed{\frac{\pi}{3}}", r"\frac{\pi}{2}", 0.0),
    (r"\boxed{e^{2}}", "e^2", 1.0),
    (r"\boxed{\sqrt{4}}", "2", 1.0),
    (r"\boxed{2^{-1}}", "0.5", 1.0),
    (r"\boxed{\log_2 8}", "3", 1.0),
    (r"\boxed{\sin(\pi/2)}", "1", 1.0),
    (r"\boxed{3!}", "6", 1.0),
    (r"\boxed{\binom{5}{2}}", "10", 1.0),
    (r"\boxed{\frac{a+b}{2}}", r"\frac{b+a}{2}", 1.0),
    (r"\boxed{\frac{a-b}{2}}", r"\frac{a+b}{2}", 0.0),
    (r"\boxed{1+i}", "i+1", 1.0),
    (r"\boxed{\infty}", r"\infty", 1.0),
    (r"\boxed{-\infty}", r"\infty", 0.0),
    (r"\boxed{2+\sqrt{3}}", r"\sqrt{3}+2", 1.0),
    (r"\boxed{2-\sqrt{3}}", r"\sqrt{3}+2", 0.0),
]

INTERVALS_SETS_TUPLES: list[MathCase] = [
    (r"\boxed{[1,2)}", "[1,2)", 1.0),
    (r"\boxed{(1,2]}", "[1,2)", 0.0),
    (r"\boxed{[0, \infty)}", r"[0,\infty)", 1.0),
    (r"\boxed{(-\infty, 3)}", r"(-\infty,3)", 1.0),
    (r"\boxed{(-\infty, 3]}", r"(-\infty,3)", 0.0),
    (r"\boxed{[1,2] \cup [3,4]}", r"[1,2]\cup[3,4]", 1.0),
    (r"\boxed{\{1,2,3\}}", r"\{3,2,1\}", 1.0),
    (r"\boxed{\{1,2\}}", r"\{1,2,3\}", 0.0),
    (r"\boxed{1, 2, 3}", "3, 2, 1", 1.0),
    (r"\boxed{2, 3}", "2, 4", 0.0),
    (r"\boxed{(1, 2)}", "(1,2)", 1.0),
    (r"\boxed{\left(1, 2\right)}", "(1, 2)", 1.0),
    (r"\boxed{(3, -1)}", "(3,-1)", 1.0),
    (r"\boxed{(3, 1)}", "(3,-1)", 0.0),
    (r"\boxed{x=2 \text{ or } x=3}", "2, 3", 1.0),
]

EXTRACTION: list[MathCase] = [
    ("<answer>42</answer>", "42", 1.0),
    ("<think>maybe 41</think><answer> 42 </answer>", "42", 1.0),
    (r"<answer>The result is \boxed{7}</answer>", "7", 1.0),
    ("<answer>41</answer> wait, <answer>42</answer>", "42", 1.0),
    ("The answer is 42.", "42", 1.0),
    ("The final answer is: 42", "42", 1.0),
    ("So the answer is $\\frac{1}{2}$.", "0.5", 1.0),
    ("Answer: 17", "17", 1.0),
    ("First 3 then 5, so 8 in total", "8", 1.0),
    ("First 3 then 5, so 8 in total", "5", 0.0),
    ("I get 3.75 in the end", "3.75", 1.0),
    (r"\boxed{1}. Checking the second step again shows a slip. The sum is \boxed{2}", "2", 1.0),
    (r"\boxed{1}. Checking the second step again shows a slip. The sum is \boxed{2}", "1", 0.0),
    (r"\boxed{1} no wait \boxed{2}", "2", 0.0),  # boxes this close are one answer: {1, 2}
    (r"x = \boxed{2} or x = \boxed{3}", "2, 3", 1.0),
    (r"x = \boxed{2} or x = \boxed{3}", "2", 0.0),
    (r"\boxed{\frac{1}{\boxed{2}}}", "2", 1.0),
    (r"the set is \boxed{\{1, 2\}} and unclosed \boxed{3", r"\{1,2\}", 1.0),
    ("I do not know.", "42", 0.0),
    ("", "42", 0.0),
    (r"\boxed{}", "42", 0.0),
    ("<answer></answer>", "42", 0.0),
    (r"\boxed{\text{(B)}}", "B", 1.0),
    (r"\boxed{(C)}", "B", 0.0),
    (r"The answer is (B).", "B", 1.0),
    ("Comparing the options, only (D) works.", "D", 1.0),  # a choice without "answer is"
    ("Comparing the options, only (D) works.", "C", 0.0),
    (r"Option (E) is out, so \boxed{2e}", "e", 0.0),  # a lowercase gold is not a choice
    ("So the answer is (B).", "(b)", 1.0),
    ("Final Answer: The largest $n$ is 34.", "34", 1.0),  # not the whole sentence
    # an intermediate box does not win over a later stated final answer
    (r"First \boxed{3} is one part. Adding the rest, the final answer is $5$.", "5", 1.0),
    (r"First \boxed{3} is one part. Adding the rest, the final answer is $5$.", "3", 0.0),
    # no box: the whole LaTeX answer, not its last number
    ("(7, 6)", "(7,6)", 1.0),
    ("So the ordered pair is $(7, 6)$.", "6", 0.0),
    (r"x \geq 5", r"x \ge 5", 1.0),
    (r"x \geq 5", "5", 0.0),
    (r"x \geq 5", r"[5, \infty)", 1.0),  # an inequality is its interval
    (r"\boxed{[5, \infty)}", r"x \ge 5", 1.0),
    (r"\boxed{(5, \infty)}", r"x \ge 5", 0.0),
    (
        r"$\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}$",
        r"\begin{pmatrix}1&2\\3&4\end{pmatrix}",
        1.0,
    ),
    (r"$\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}$", "4", 0.0),
]

GOLD_FORMATS: list[MathCase] = [
    # gold answers with or without LaTeX delimiters, boxed, or numeric strings
    (r"\boxed{0.5}", r"$\frac{1}{2}$", 1.0),
    (r"\boxed{0.5}", r"\(\frac{1}{2}\)", 1.0),
    (r"\boxed{0.5}", r"\[\frac{1}{2}\]", 1.0),
    (r"\boxed{0.5}", r"\boxed{\frac{1}{2}}", 1.0),
    (r"\boxed{3\sqrt{2}}", r"$\sqrt{18}$", 1.0),
    (r"\boxed{10}", r"$10$", 1.0),
    (r"\boxed{10}", r"$11$", 0.0),
    (r"\boxed{\frac{7}{2}}", r"\text{3.5}", 1.0),
]

ALL_CASES: list[MathCase] = [
    *INTEGERS,
    *SHARED_DIGITS,
    *FRACTIONS_AND_DECIMALS,
    *THOUSANDS,
    *PERCENTAGES,
    *WRAPPERS_AND_UNITS,
    *ASSIGNMENTS,
    *EXPRESSIONS,
    *INTERVALS_SETS_TUPLES,
    *EXTRACTION,
    *GOLD_FORMATS,
]
