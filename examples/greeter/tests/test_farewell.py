import unittest


class FarewellTest(unittest.TestCase):
    def test_says_goodbye(self):
        from greeter.farewell import farewell

        self.assertEqual(farewell("Ada"), "Goodbye, Ada.")
