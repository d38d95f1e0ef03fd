import unittest

from slug import slugify


class SlugTest(unittest.TestCase):
    def test_lowercase_words_joined_by_hyphens(self) -> None:
        self.assertEqual(slugify("Hello, Loop World!"), "hello-loop-world")

    def test_empty(self) -> None:
        self.assertEqual(slugify("  "), "")


if __name__ == "__main__":
    unittest.main()
