import unittest


class GreetTest(unittest.TestCase):
    def test_greets_by_name(self):
        from greeter.greet import greet

        self.assertEqual(greet("Ada"), "Hello, Ada!")
