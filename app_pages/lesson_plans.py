"""Lessons: sequences of views in a given state with what to notice and a question for the class."""
from explorer.ui.lessons import lessons_page

lessons_page()
