from tokenmill.errors import TokenmillError
